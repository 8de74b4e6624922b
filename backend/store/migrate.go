package store

import (
	"fmt"

	"gorm.io/gorm"
)

// migrations are applied in order, each in its own transaction, and recorded in
// PRAGMA user_version. Never edit a released one; append a new one.
var migrations = []string{
	// 1: the first schema. Times are Unix milliseconds. CHECK and UNIQUE carry the invariants.
	`
CREATE TABLE meta (
	key   TEXT PRIMARY KEY,
	value TEXT NOT NULL
);

CREATE TABLE tasks (
	id         TEXT PRIMARY KEY,
	owner      TEXT NOT NULL,            -- the agent identity key (iss, sub)
	brand      TEXT NOT NULL,
	context_id TEXT NOT NULL,
	state      TEXT NOT NULL,
	status_ns  INTEGER,                  -- status.timestamp in Unix nanoseconds (NULL: none), for statusTimestampAfter
	version    INTEGER NOT NULL CHECK (version > 0),
	data       BLOB NOT NULL,            -- the a2a.Task as JSON
	created_at INTEGER NOT NULL,
	updated_at INTEGER NOT NULL
);
CREATE INDEX tasks_owner_updated ON tasks (owner, brand, updated_at DESC, id DESC);
CREATE INDEX tasks_state ON tasks (state);

CREATE TABLE grants (
	id             TEXT PRIMARY KEY,
	agent_iss      TEXT NOT NULL,
	agent_sub      TEXT NOT NULL,
	brand          TEXT NOT NULL,
	capability     TEXT NOT NULL,
	workspace      TEXT NOT NULL,
	access_mode    TEXT NOT NULL CHECK (access_mode IN ('read_only', 'read_write')),
	scope          TEXT NOT NULL,
	issued_at      INTEGER NOT NULL,
	expires_at     INTEGER,              -- NULL: until revoked
	revoked_at     INTEGER,
	jws            TEXT NOT NULL,        -- the grant, signed by the node key
	device_flow_id TEXT UNIQUE,
	last_used_at   INTEGER,
	uses           INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX grants_agent ON grants (agent_iss, agent_sub, brand);
CREATE INDEX grants_issued ON grants (issued_at DESC);

CREATE TABLE device_flows (
	id               TEXT PRIMARY KEY,
	device_code_hash TEXT NOT NULL UNIQUE, -- SHA-256 of the device code; the code itself is never stored
	user_code        TEXT NOT NULL,        -- shown on the consent page; useless without the device code
	agent_iss        TEXT NOT NULL,
	agent_sub        TEXT NOT NULL,
	brand            TEXT NOT NULL,
	scope            TEXT NOT NULL,
	status           TEXT NOT NULL CHECK (status IN ('pending', 'approved', 'denied', 'expired', 'redeemed', 'locked')),
	interval_s       INTEGER NOT NULL,
	last_poll_at     INTEGER,
	failed_guesses   INTEGER NOT NULL DEFAULT 0,
	duration         TEXT NOT NULL DEFAULT '',
	grant_id         TEXT REFERENCES grants (id),
	created_at       INTEGER NOT NULL,
	expires_at       INTEGER NOT NULL,
	decided_at       INTEGER
);
CREATE UNIQUE INDEX device_flows_pending_code ON device_flows (user_code) WHERE status = 'pending';
CREATE INDEX device_flows_agent ON device_flows (agent_iss, agent_sub, status);

CREATE TABLE turns (
	id          TEXT PRIMARY KEY,
	task_id     TEXT NOT NULL,
	context_id  TEXT NOT NULL,
	brand       TEXT NOT NULL,
	scope       TEXT NOT NULL CHECK (scope = 'pact'), -- every turn runs in the node's pact scope
	brand_scope TEXT NOT NULL,
	grant_id    TEXT NOT NULL REFERENCES grants (id),
	agent_iss   TEXT NOT NULL,
	agent_sub   TEXT NOT NULL,
	policy_hash TEXT NOT NULL,
	status      TEXT NOT NULL CHECK (status IN ('running', 'completed', 'failed', 'canceled')),
	reason      TEXT NOT NULL DEFAULT '',
	started_at  INTEGER NOT NULL,
	ended_at    INTEGER
);
CREATE INDEX turns_status ON turns (status);

CREATE TABLE receipts (
	seq        INTEGER PRIMARY KEY CHECK (seq > 0),
	id         TEXT NOT NULL UNIQUE,
	turn_id    TEXT NOT NULL UNIQUE REFERENCES turns (id),
	prev_hash  TEXT NOT NULL UNIQUE,
	hash       TEXT NOT NULL UNIQUE,     -- SHA-256 of the JWS (lowercase hex); the next receipt's prev_hash
	task_id    TEXT NOT NULL,
	context_id TEXT NOT NULL,
	brand      TEXT NOT NULL,
	scope      TEXT NOT NULL,            -- the brand's scope (the turn's pact scope is always 'pact')
	grant_id   TEXT NOT NULL,
	agent_iss  TEXT NOT NULL,
	agent_sub  TEXT NOT NULL,
	status     TEXT NOT NULL CHECK (status IN ('completed', 'failed', 'canceled')),
	reason     TEXT NOT NULL DEFAULT '',
	exit_code  INTEGER NOT NULL,
	started_at INTEGER NOT NULL,
	ended_at   INTEGER NOT NULL,
	jws        TEXT NOT NULL
);
CREATE INDEX receipts_agent ON receipts (agent_iss, agent_sub, seq DESC);
CREATE INDEX receipts_brand ON receipts (brand, seq DESC);
CREATE INDEX receipts_status ON receipts (status, seq DESC);
CREATE INDEX receipts_ended ON receipts (ended_at, seq);
-- Append only: a guard rail against our own bugs, not against someone holding the
-- file (they can drop these); the signed hash chain is what detects tampering.
CREATE TRIGGER receipts_no_update BEFORE UPDATE ON receipts BEGIN SELECT RAISE(ABORT, 'receipts are append-only'); END;
CREATE TRIGGER receipts_no_delete BEFORE DELETE ON receipts BEGIN SELECT RAISE(ABORT, 'receipts are append-only'); END;
`,
	// 2: what an agent stores without the owner's approval, tasks that never ran a turn, is
	// counted per agent and per issuer site and expires (docs/threats.md, K2–K5): the issuer's
	// registrable domain on each task, and whether a turn ever started on it.
	`
ALTER TABLE tasks ADD COLUMN issuer_site TEXT NOT NULL DEFAULT '';
ALTER TABLE tasks ADD COLUMN ran INTEGER NOT NULL DEFAULT 0 CHECK (ran IN (0, 1));
UPDATE tasks SET ran = 1 WHERE id IN (SELECT task_id FROM turns);
CREATE INDEX tasks_owner_ran ON tasks (owner, ran);
CREATE INDEX tasks_site_ran ON tasks (issuer_site, ran);
CREATE INDEX tasks_ran_updated ON tasks (ran, updated_at);
`,
	// 3: a finished task, stored in its receipt's commit, goes into no index that is never
	// asked about finished tasks: the waiting-task caps count only tasks that never ran, and
	// the start-up sweep looks only for unfinished ones (FailInterrupted). Fewer pages a turn.
	`
DROP INDEX tasks_owner_ran;
DROP INDEX tasks_site_ran;
DROP INDEX tasks_state;
CREATE INDEX tasks_waiting_owner ON tasks (owner, updated_at) WHERE ran = 0;
CREATE INDEX tasks_waiting_site ON tasks (issuer_site, updated_at) WHERE ran = 0;
CREATE INDEX tasks_unfinished ON tasks (state) WHERE state IN ('TASK_STATE_SUBMITTED', 'TASK_STATE_WORKING');
`,
	// 4: the receipts log (docs/wire.md, "The receipts log"): the Merkle tree's stored hashes
	// (golang.org/x/mod/sumdb/tlog's numbering) and every checkpoint the node signed. Receipts
	// committed before are added as leaves by the next write that appends one (catchUpLog).
	`
CREATE TABLE log_hashes (
	idx  INTEGER PRIMARY KEY CHECK (idx >= 0),
	hash BLOB NOT NULL CHECK (length(hash) = 32)
);
CREATE TABLE log_checkpoints (
	size INTEGER PRIMARY KEY CHECK (size > 0),
	note TEXT NOT NULL                   -- the C2SP checkpoint, a signed note
);
CREATE TRIGGER log_hashes_no_update BEFORE UPDATE ON log_hashes BEGIN SELECT RAISE(ABORT, 'the receipts log is append-only'); END;
CREATE TRIGGER log_hashes_no_delete BEFORE DELETE ON log_hashes BEGIN SELECT RAISE(ABORT, 'the receipts log is append-only'); END;
CREATE TRIGGER log_checkpoints_no_update BEFORE UPDATE ON log_checkpoints BEGIN SELECT RAISE(ABORT, 'the receipts log is append-only'); END;
CREATE TRIGGER log_checkpoints_no_delete BEFORE DELETE ON log_checkpoints BEGIN SELECT RAISE(ABORT, 'the receipts log is append-only'); END;
`,
	// 5: witnesses (docs/wire.md, "Witnesses"): the cosignature an agent sent of a checkpoint
	// the node signed, one per agent and checkpoint.
	`
CREATE TABLE log_cosignatures (
	agent_issuer  TEXT NOT NULL,
	agent_subject TEXT NOT NULL,
	size          INTEGER NOT NULL REFERENCES log_checkpoints (size),
	witness       TEXT NOT NULL,    -- the witness's vkey
	signed_at     INTEGER NOT NULL, -- the cosignature's time, Unix seconds
	line          TEXT NOT NULL,    -- the cosignature, a signed-note signature line
	PRIMARY KEY (agent_issuer, agent_subject, size)
);
`,
	// 6: the model gateway's budgets (docs/model-gateway.md): a grant's own tokens a day, set at
	// approval (NULL: its brand's, 0: no limit), and each grant's tokens used per UTC day, so a
	// restart gives no grant its budget back (docs/threats.md M10).
	`
ALTER TABLE grants ADD COLUMN tokens_per_day INTEGER CHECK (tokens_per_day >= 0);
CREATE TABLE model_use (
	grant_id TEXT NOT NULL,
	day      TEXT NOT NULL,              -- the UTC day, YYYY-MM-DD
	tokens   INTEGER NOT NULL CHECK (tokens >= 0),
	PRIMARY KEY (grant_id, day)
) WITHOUT ROWID;
`,
	// 7: the receipts log's leaves become commitments (LeafData), so that the public log tells
	// no one what a receipt says (docs/threats.md L7). The log made of the receipts' JWS is
	// emptied: catchUpLog rebuilds it from the receipts with the next receipt, under the origin
	// the old log's with "/v2" (receipts.MovedOrigin: a new log, as its roots differ). The old
	// log's newest checkpoint is kept in meta (MetaLogMovedFrom), which `receipts verify` checks. The cosignatures were of the old
	// log's checkpoints; from now on an agent has one, its newest (docs/threats.md L11).
	`
INSERT OR REPLACE INTO meta (key, value) SELECT 'log.moved_from', note FROM log_checkpoints ORDER BY size DESC LIMIT 1;
UPDATE meta SET value = value || '/v2' WHERE key = 'log.origin';
DROP TABLE log_cosignatures;
DROP TRIGGER IF EXISTS log_hashes_no_delete;
DROP TRIGGER IF EXISTS log_checkpoints_no_delete;
DELETE FROM log_hashes;
DELETE FROM log_checkpoints;
CREATE TRIGGER log_hashes_no_delete BEFORE DELETE ON log_hashes BEGIN SELECT RAISE(ABORT, 'the receipts log is append-only'); END;
CREATE TRIGGER log_checkpoints_no_delete BEFORE DELETE ON log_checkpoints BEGIN SELECT RAISE(ABORT, 'the receipts log is append-only'); END;
CREATE TABLE log_cosignatures (
	agent_issuer  TEXT NOT NULL,
	agent_subject TEXT NOT NULL,
	size          INTEGER NOT NULL REFERENCES log_checkpoints (size),
	witness       TEXT NOT NULL,    -- the witness's vkey
	signed_at     INTEGER NOT NULL, -- the cosignature's time, Unix seconds
	line          TEXT NOT NULL,    -- the cosignature, a signed-note signature line
	PRIMARY KEY (agent_issuer, agent_subject)
);
`,
	// 8: receipts the owner's agents received from other nodes (docs/assistants.md): each as it
	// came, with the JWKS and tlog-proof it was checked with, so it can be checked again offline,
	// and what the checks found on arrival.
	`
CREATE TABLE received_receipts (
	id             INTEGER PRIMARY KEY AUTOINCREMENT,
	node           TEXT NOT NULL,    -- the issuing node's publicUrl (the receipt's iss)
	rid            TEXT NOT NULL,
	agent_issuer   TEXT NOT NULL,    -- the owner's agent: its issuer (<publicUrl>/id when it received it)…
	agent          TEXT NOT NULL,    -- …and its name, the sub
	brand          TEXT NOT NULL,
	task           TEXT NOT NULL,
	status         TEXT NOT NULL,
	jws            TEXT NOT NULL,
	proof          TEXT NOT NULL,    -- the C2SP tlog-proof that came with it
	jwks           TEXT NOT NULL,    -- the node JWKS it was checked with
	verified       INTEGER NOT NULL, -- signature and log inclusion held on arrival
	log_consistent INTEGER NOT NULL, -- the node's log was consistent with every checkpoint the agent held
	problem        TEXT NOT NULL,    -- why not, in words
	received_at    INTEGER NOT NULL, -- Unix seconds
	UNIQUE (node, rid)
);
`,
}

func (db *DB) migrate() error {
	var v int
	if err := db.w.Raw("PRAGMA user_version").Scan(&v).Error; err != nil {
		return err
	}
	if v > len(migrations) {
		return fmt.Errorf("pact.sqlite has schema version %d, newer than this build knows (%d): use a newer Aether", v, len(migrations))
	}
	for i := v; i < len(migrations); i++ {
		err := db.w.Transaction(func(tx *gorm.DB) error {
			if err := tx.Exec(migrations[i]).Error; err != nil {
				return fmt.Errorf("migration %d: %w", i+1, err)
			}
			return tx.Exec(fmt.Sprintf("PRAGMA user_version = %d", i+1)).Error
		})
		if err != nil {
			return err
		}
	}
	return nil
}
