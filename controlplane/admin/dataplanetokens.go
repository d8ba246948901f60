package admin
