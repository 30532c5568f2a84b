-- The store's tables as main 83a16c0 created them (sqlite): meta.create_all,
-- no alembic_version table. Compiled from that commit's broker/daemon/store/schema.py
-- (CreateTable/CreateIndex); the migration tests build 'a database made by today's code' from it.

CREATE TABLE actions (
	id INTEGER NOT NULL,
	idempotency_key VARCHAR(64) NOT NULL,
	owner VARCHAR(128) NOT NULL,
	kind VARCHAR(16) NOT NULL,
	payload JSON NOT NULL,
	status VARCHAR(16) NOT NULL,
	result JSON,
	created_at DATETIME NOT NULL,
	updated_at DATETIME NOT NULL,
	PRIMARY KEY (id),
	UNIQUE (idempotency_key)
);
CREATE INDEX ix_actions_owner ON actions (owner);
CREATE INDEX ix_actions_status ON actions (status);
CREATE TABLE decisions (
	id INTEGER NOT NULL,
	notice_id VARCHAR(128),
	owner VARCHAR(128) NOT NULL,
	kind VARCHAR(24) NOT NULL,
	workload VARCHAR(64),
	reason VARCHAR(1000) NOT NULL,
	latency_s FLOAT NOT NULL,
	break_glass_usd FLOAT NOT NULL,
	payload JSON NOT NULL,
	created_at DATETIME NOT NULL,
	PRIMARY KEY (id),
	UNIQUE (notice_id)
);
CREATE INDEX ix_decisions_owner ON decisions (owner);
CREATE TABLE fleet (
	instance_id VARCHAR(64) NOT NULL,
	owner VARCHAR(128) NOT NULL,
	workload VARCHAR(64) NOT NULL,
	pool_key VARCHAR(200) NOT NULL,
	tier VARCHAR(16) NOT NULL,
	units INTEGER NOT NULL,
	state VARCHAR(16) NOT NULL,
	launched_at DATETIME NOT NULL,
	action_key VARCHAR(64),
	updated_at DATETIME NOT NULL,
	PRIMARY KEY (instance_id)
);
CREATE INDEX ix_fleet_owner ON fleet (owner);
CREATE TABLE hook_results (
	notice_id VARCHAR(128) NOT NULL,
	owner VARCHAR(128) NOT NULL,
	workload VARCHAR(64) NOT NULL,
	ok BOOLEAN NOT NULL,
	record JSON NOT NULL,
	created_at DATETIME NOT NULL,
	PRIMARY KEY (notice_id)
);
CREATE INDEX ix_hook_results_owner ON hook_results (owner);
CREATE TABLE lease (
	name VARCHAR(128) NOT NULL,
	holder VARCHAR(128) NOT NULL,
	expires_at DATETIME NOT NULL,
	acquired_at DATETIME NOT NULL,
	PRIMARY KEY (name)
);
CREATE TABLE notices (
	notice_id VARCHAR(128) NOT NULL,
	kind VARCHAR(16) NOT NULL,
	instance_id VARCHAR(64) NOT NULL,
	at DATETIME NOT NULL,
	received_at DATETIME NOT NULL,
	handled_at DATETIME,
	PRIMARY KEY (notice_id)
);
CREATE TABLE plans (
	id INTEGER NOT NULL,
	owner VARCHAR(128) NOT NULL,
	generation INTEGER NOT NULL,
	created_at DATETIME NOT NULL,
	summary JSON NOT NULL,
	PRIMARY KEY (id)
);
CREATE INDEX ix_plans_owner ON plans (owner);
