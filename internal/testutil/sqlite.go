package testutil

import (
	"os/exec"
	"strings"
)

// SQLiteTwoConnectionsScript drives two connections of one sqlite3 process
// (rollback journal) on the database it was started with: both hold a read
// transaction, the first commits, the second writes and commits (it needs
// the exclusive lock while the process's shared lock was taken through the
// first connection's descriptor), then the first connection closes and
// the second writes again. It prints 1, 1 and 3.
const SQLiteTwoConnectionsScript = `.bail on
BEGIN;
SELECT count(*) FROM t;
.connection 1
.open %s
BEGIN;
SELECT count(*) FROM t;
.connection 0
COMMIT;
.connection 1
INSERT INTO t VALUES(2);
COMMIT;
.connection close 0
INSERT INTO t VALUES(3);
SELECT count(*) FROM t;
`

// SQLiteTwoConnections runs SQLiteTwoConnectionsScript with the sqlite3 CLI
// at sqlite on db (a database with a table t of one row) and returns its
// output; err is set when it failed or printed something else.
func SQLiteTwoConnections(sqlite, db string) (string, error) {
	cmd := exec.Command(sqlite, db)
	cmd.Stdin = strings.NewReader(strings.Replace(SQLiteTwoConnectionsScript, "%s", db, 1))
	out, err := cmd.CombinedOutput()
	if err == nil && strings.Join(strings.Fields(string(out)), " ") != "1 1 3" {
		err = errUnexpected
	}
	return string(out), err
}

type unexpectedOutput struct{}

func (unexpectedOutput) Error() string { return "unexpected output (want 1, 1, 3)" }

var errUnexpected error = unexpectedOutput{}
