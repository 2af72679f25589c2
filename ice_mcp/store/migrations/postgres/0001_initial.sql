-- Every record kind of the run store (store/base.py), as the SQLite store keeps them (store/sqlite*.py).
CREATE TABLE runs (
    seq BIGSERIAL UNIQUE,
    run_id TEXT COLLATE "C" PRIMARY KEY,
    workflow TEXT NOT NULL,
    status TEXT NOT NULL,
    started_at DOUBLE PRECISION,
    idempotency_key TEXT,
    record TEXT NOT NULL,
    owner TEXT,
    blueprint TEXT,
    version INTEGER,
    retry_of TEXT,
    principal TEXT,
    trigger_kind TEXT,
    summary TEXT,
    finished_at DOUBLE PRECISION
);
CREATE UNIQUE INDEX runs_by_key ON runs (idempotency_key) WHERE idempotency_key IS NOT NULL;
CREATE INDEX runs_by_start ON runs (started_at DESC NULLS LAST, seq DESC);
CREATE INDEX runs_by_principal ON runs (principal, started_at DESC NULLS LAST, seq DESC);
CREATE INDEX runs_by_workflow ON runs (workflow, started_at DESC NULLS LAST, seq DESC);
CREATE INDEX runs_by_status ON runs (status, started_at DESC NULLS LAST, seq DESC);
CREATE INDEX runs_by_trigger ON runs (trigger_kind, started_at DESC NULLS LAST, seq DESC);
CREATE INDEX runs_by_finish ON runs (finished_at);

CREATE TABLE events (
    run_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    last_seq INTEGER NOT NULL,
    events TEXT NOT NULL,
    PRIMARY KEY (run_id, seq)
);

CREATE TABLE blueprints (
    name TEXT COLLATE "C" NOT NULL,
    version INTEGER NOT NULL,
    source TEXT NOT NULL,
    created_at DOUBLE PRECISION NOT NULL,
    deleted BOOLEAN NOT NULL DEFAULT FALSE,
    PRIMARY KEY (name, version)
);

CREATE TABLE owners (
    owner_id TEXT PRIMARY KEY,
    host TEXT NOT NULL,
    pid INTEGER NOT NULL,
    heartbeat DOUBLE PRECISION NOT NULL
);

CREATE TABLE spend (
    caller TEXT PRIMARY KEY,
    usd DOUBLE PRECISION NOT NULL
);

CREATE TABLE secrets (
    name TEXT PRIMARY KEY,
    value BYTEA NOT NULL
);

CREATE TABLE blobs (
    key TEXT PRIMARY KEY,
    data BYTEA NOT NULL
);

CREATE TABLE signals (
    seq BIGSERIAL PRIMARY KEY,
    kind TEXT NOT NULL,
    subject TEXT NOT NULL,
    at DOUBLE PRECISION NOT NULL,
    data TEXT
);
CREATE INDEX signals_by_subject ON signals (kind, subject);
CREATE INDEX signals_by_time ON signals (at);

CREATE TABLE schedules (
    id TEXT COLLATE "C" PRIMARY KEY,
    target TEXT COLLATE "C" NOT NULL,
    target_kind TEXT NOT NULL,
    spec TEXT NOT NULL,
    inputs TEXT NOT NULL,
    policy TEXT NOT NULL,
    paused BOOLEAN NOT NULL,
    note TEXT,
    revision INTEGER NOT NULL,
    created_at DOUBLE PRECISION NOT NULL,
    updated_at DOUBLE PRECISION NOT NULL,
    cursor DOUBLE PRECISION,
    origin TEXT NOT NULL,
    running TEXT NOT NULL,
    counts TEXT NOT NULL,
    principal TEXT
);
CREATE INDEX schedules_by_target ON schedules (target, id);

CREATE TABLE firings (
    schedule_id TEXT NOT NULL,
    slot DOUBLE PRECISION NOT NULL,
    outcome TEXT NOT NULL,
    run_id TEXT,
    fired_at DOUBLE PRECISION NOT NULL,
    replica TEXT,
    count INTEGER NOT NULL,
    PRIMARY KEY (schedule_id, slot)
);
CREATE INDEX firings_by_outcome ON firings (schedule_id, outcome, slot DESC);

CREATE TABLE scheduler (
    name TEXT PRIMARY KEY,
    alive_at DOUBLE PRECISION NOT NULL
);

CREATE TABLE schedule_generation (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    generation BIGINT NOT NULL
);
INSERT INTO schedule_generation (id, generation) VALUES (1, 0);

CREATE TABLE hooks (
    id TEXT COLLATE "C" PRIMARY KEY,
    body TEXT NOT NULL
);

CREATE TABLE deliveries (
    hook_id TEXT NOT NULL,
    delivery_id TEXT NOT NULL,
    run_id TEXT NOT NULL,
    received_at DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (hook_id, delivery_id)
);

CREATE TABLE notify_targets (
    id TEXT COLLATE "C" PRIMARY KEY,
    body TEXT NOT NULL
);

CREATE TABLE outbox (
    event_id TEXT NOT NULL,
    target_id TEXT NOT NULL,
    state TEXT NOT NULL,
    next_at DOUBLE PRECISION NOT NULL,
    created_at DOUBLE PRECISION NOT NULL,
    body TEXT NOT NULL,
    PRIMARY KEY (event_id, target_id)
);
CREATE INDEX outbox_due ON outbox (state, next_at);
CREATE INDEX outbox_by_target ON outbox (target_id, created_at DESC);

CREATE TABLE admissions (
    workflow TEXT NOT NULL,
    run_id TEXT NOT NULL,
    admitted_at DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (workflow, run_id)
);

CREATE TABLE admission_queue (
    workflow TEXT NOT NULL,
    run_id TEXT NOT NULL,
    queued_at DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (workflow, run_id)
);
