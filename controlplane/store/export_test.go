package store

// InterpretErrorForTest exposes interpretError to the external test package.
var InterpretErrorForTest = interpretError
