// Package e2e runs Tollgate assembled in-process on loopback — control-plane replicas and data planes
// started through their app packages exactly as the binaries start them, on a real Postgres (storetest)
// and a real Redis — and checks what only the assembled system can show, for example snapshot
// propagation across replicas, surviving a control-plane outage, and refusal of snapshots that do not
// compile. Its benchmarks measure snapshot propagation latency and the cost of large snapshots
// (docs/benchmarks.md, "Snapshots").
package e2e
