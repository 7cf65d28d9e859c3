package redistest

import "testing"

// TestMain runs the package's tests as every test package does (see Main): the proxy's test
// needs a server.
func TestMain(m *testing.M) { Main(m, nil) }
