package store

// InterpretErrorForTest exposes interpretError to the external test package.
var InterpretErrorForTest = interpretError

// ListUsagesPlainForTest exposes the listing as one query over the partitioned table, the reference the
// partition-by-partition walk must agree with.
var ListUsagesPlainForTest = listUsagesPlain

// ErrRetryListingForTest is the error of a listing whose partitions changed between its statements twice.
var ErrRetryListingForTest = errRetryListing
