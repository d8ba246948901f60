// Package e2e runs Tollgate assembled in-process on loopback — control-plane replicas and data planes
// started through their app packages exactly as the binaries start them, on a real Postgres (storetest)
// and a real Redis — and checks what only the assembled system can show, for example snapshot
// propagation across replicas, surviving a control-plane outage, and refusal of snapshots that do not
// compile. Its benchmarks measure snapshot propagation latency and the cost of large snapshots
// (docs/benchmarks.md, "Snapshots").
//
// Every test starts the system through the one harness in harness_test.go: newCluster (a fresh Postgres
// database and the tokens every process shares), its startCP and startDP/startDPWith (a data plane with
// dpOptions: Redis key prefix, environment, configuration tweak, log sink), cluster.admin (the admin REST
// API with the bootstrap token) and cluster.sync (wait until a data plane serves what is committed), and on
// top of them newStack/newStackWith, the single-plane stack most tests use (one control plane, the mock
// upstream from startMock, one data plane; requests through send, usage rows through usages/waitUsages).
// The SDK suite's sdkStack embeds the stack and adds its recording transport; dpStart feeds a data plane
// from startDataPlane a hand-built snapshot through a stand-in control plane. Every Redis key prefix comes
// from redisPrefix, whose keys are deleted when the test ends.
package e2e
