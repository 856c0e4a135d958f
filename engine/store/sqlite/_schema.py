"""The SQLite schema, as numbered migrations (PRAGMA user_version counts the ones applied).

Never edit a released entry: add a new one, and its PostgreSQL dialect under the same number in
``_pg_schema.py`` (tests/test_store_migrations.py checks that both backends end with the same
tables and columns). It also upgrades a file of every earlier version and checks what it holds
afterwards.
"""

from __future__ import annotations

from engine.store.sqlite._schema_later import LATER

MIGRATIONS: list[str] = [
    # 1: the first release
    """
    CREATE TABLE conversations (
        id INTEGER PRIMARY KEY,
        channel TEXT NOT NULL,
        chat_id TEXT NOT NULL,
        is_private INTEGER NOT NULL DEFAULT 1,
        active INTEGER NOT NULL DEFAULT 1,
        created_at REAL NOT NULL
    );
    CREATE UNIQUE INDEX conversations_active ON conversations(channel, chat_id) WHERE active = 1;
    CREATE TABLE messages (
        id INTEGER PRIMARY KEY,
        conversation_id INTEGER NOT NULL REFERENCES conversations(id),
        role TEXT NOT NULL,
        content TEXT,
        tool_calls TEXT,
        tool_call_id TEXT,
        created_at REAL NOT NULL
    );
    CREATE INDEX messages_conversation ON messages(conversation_id, id);
    CREATE TABLE inbox (
        id INTEGER PRIMARY KEY,
        channel TEXT NOT NULL,
        chat_id TEXT NOT NULL,
        message_id TEXT NOT NULL,
        user_id TEXT NOT NULL,
        user_name TEXT NOT NULL,
        text TEXT NOT NULL,
        is_private INTEGER NOT NULL,
        state TEXT NOT NULL DEFAULT 'queued',
        received_at REAL NOT NULL,
        UNIQUE(channel, chat_id, message_id)
    );
    CREATE INDEX inbox_queued ON inbox(state, channel, chat_id) WHERE state != 'answered';
    CREATE TABLE confirmations (
        id TEXT PRIMARY KEY,
        conversation_id INTEGER NOT NULL REFERENCES conversations(id),
        channel TEXT NOT NULL,
        chat_id TEXT NOT NULL,
        user_id TEXT NOT NULL,
        user_name TEXT NOT NULL,
        tool TEXT NOT NULL,
        call_id TEXT NOT NULL,
        args TEXT NOT NULL,
        args_hash TEXT NOT NULL,
        summary TEXT NOT NULL,
        remaining TEXT NOT NULL,
        iteration INTEGER NOT NULL,
        state TEXT NOT NULL DEFAULT 'pending',
        message_ref TEXT,
        reply_to TEXT,
        expires_at REAL NOT NULL,
        created_at REAL NOT NULL,
        decided_at REAL
    );
    CREATE INDEX confirmations_state ON confirmations(state);
    CREATE TABLE jobs (
        id TEXT PRIMARY KEY,
        conversation_id INTEGER NOT NULL REFERENCES conversations(id),
        channel TEXT NOT NULL,
        chat_id TEXT NOT NULL,
        user_id TEXT NOT NULL,
        tool TEXT NOT NULL,
        args TEXT NOT NULL,
        resumable INTEGER NOT NULL DEFAULT 0,
        state TEXT NOT NULL DEFAULT 'running',
        result TEXT,
        for_user TEXT,
        is_error INTEGER NOT NULL DEFAULT 0,
        created_at REAL NOT NULL,
        finished_at REAL
    );
    CREATE INDEX jobs_state ON jobs(state);
    """,
    # 2: notes
    """
    CREATE TABLE notes (
        id INTEGER PRIMARY KEY,
        owner TEXT NOT NULL,
        text TEXT NOT NULL,
        created_at REAL NOT NULL
    );
    CREATE INDEX notes_owner ON notes(owner, id);
    """,
    # 3: message parts (errors, speakers, media), the complete action of a confirmation,
    #    deliveries of answers (exactly once across restarts), inbox pruning
    """
    ALTER TABLE messages ADD COLUMN is_error INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE messages ADD COLUMN speaker TEXT;
    ALTER TABLE messages ADD COLUMN media TEXT;
    ALTER TABLE confirmations ADD COLUMN details TEXT NOT NULL DEFAULT '';
    CREATE TABLE deliveries (
        message_id INTEGER PRIMARY KEY REFERENCES messages(id) ON DELETE CASCADE,
        conversation_id INTEGER NOT NULL REFERENCES conversations(id),
        channel TEXT NOT NULL,
        chat_id TEXT NOT NULL,
        reply_to TEXT,
        state TEXT NOT NULL DEFAULT 'pending',
        ref TEXT,
        created_at REAL NOT NULL,
        sent_at REAL
    );
    CREATE INDEX deliveries_pending ON deliveries(channel, chat_id) WHERE state = 'pending';
    CREATE INDEX inbox_answered ON inbox(received_at) WHERE state = 'answered';
    """,
    # 4: standing permissions ("always allow this tool in this chat"), usage per user and day,
    #    messages held back by the rate limit
    """
    CREATE TABLE grants (
        channel TEXT NOT NULL,
        chat_id TEXT NOT NULL,
        tool TEXT NOT NULL,
        granted_by TEXT NOT NULL,
        granted_by_name TEXT NOT NULL,
        granted_at REAL NOT NULL,
        PRIMARY KEY (channel, chat_id, tool)
    );
    CREATE TABLE usage (
        channel TEXT NOT NULL,
        user_id TEXT NOT NULL,
        day TEXT NOT NULL,
        prompt_tokens INTEGER NOT NULL DEFAULT 0,
        completion_tokens INTEGER NOT NULL DEFAULT 0,
        turns INTEGER NOT NULL DEFAULT 0,
        tool_calls INTEGER NOT NULL DEFAULT 0,
        PRIMARY KEY (channel, user_id, day)
    );
    ALTER TABLE inbox ADD COLUMN hold_until REAL;
    ALTER TABLE confirmations ADD COLUMN offered TEXT NOT NULL DEFAULT 'yn';
    CREATE INDEX inbox_sender ON inbox(channel, user_id, received_at);
    """,
    # 5: what came with an inbox message (pictures, files, voice): platform references, so it
    #    can be fetched again after a restart; never the bytes
    """
    ALTER TABLE inbox ADD COLUMN media TEXT;
    """,
    # 6: scheduled tasks and their runs (each recorded with its due time before it runs),
    #    each user's time zone, each chat's own settings (persona, model, reply mode)
    """
    CREATE TABLE schedules (
        id INTEGER PRIMARY KEY,
        channel TEXT NOT NULL,
        chat_id TEXT NOT NULL,
        user_id TEXT NOT NULL,
        user_name TEXT NOT NULL,
        is_private INTEGER NOT NULL,
        task TEXT NOT NULL,
        kind TEXT NOT NULL,
        spec TEXT NOT NULL,
        timezone TEXT NOT NULL,
        next_due REAL NOT NULL,
        state TEXT NOT NULL DEFAULT 'active',
        created_at REAL NOT NULL,
        cancelled_at REAL
    );
    CREATE INDEX schedules_due ON schedules(next_due) WHERE state = 'active';
    CREATE INDEX schedules_chat ON schedules(channel, chat_id) WHERE state = 'active';
    CREATE TABLE schedule_runs (
        schedule_id INTEGER NOT NULL REFERENCES schedules(id),
        due REAL NOT NULL,
        state TEXT NOT NULL,
        missed INTEGER NOT NULL DEFAULT 0,
        error TEXT,
        created_at REAL NOT NULL,
        finished_at REAL,
        PRIMARY KEY (schedule_id, due)
    );
    CREATE INDEX schedule_runs_open ON schedule_runs(state) WHERE state IN ('queued', 'running');
    CREATE TABLE user_settings (
        channel TEXT NOT NULL,
        user_id TEXT NOT NULL,
        timezone TEXT,
        PRIMARY KEY (channel, user_id)
    );
    CREATE TABLE chat_settings (
        channel TEXT NOT NULL,
        chat_id TEXT NOT NULL,
        persona TEXT,
        model TEXT,
        reply_mode TEXT,
        updated_by TEXT NOT NULL,
        updated_at REAL NOT NULL,
        PRIMARY KEY (channel, chat_id)
    );
    """,
    # 7: the context budget: running summaries of conversations, learned token ratios per model
    """
    CREATE TABLE summaries (
        conversation_id INTEGER PRIMARY KEY REFERENCES conversations(id),
        text TEXT NOT NULL,
        first_id INTEGER NOT NULL,
        last_id INTEGER NOT NULL,
        updated_at REAL NOT NULL
    );
    CREATE TABLE token_ratios (
        model TEXT PRIMARY KEY,
        ratio REAL NOT NULL,
        samples INTEGER NOT NULL,
        max_window INTEGER,
        updated_at REAL NOT NULL
    );
    """,
    # 8: several instances on one database (PostgreSQL): who is alive, which instance holds
    #    each chat and each channel's receiving side, which instance runs each job. A SQLite
    #    store has one process and leaves them empty; they are here so both schemas match.
    """
    CREATE TABLE instances (
        id INTEGER PRIMARY KEY,
        name TEXT NOT NULL,
        lease_s REAL NOT NULL,
        started_at REAL NOT NULL,
        heartbeat_at REAL NOT NULL
    );
    CREATE TABLE chat_leases (
        channel TEXT NOT NULL,
        chat_id TEXT NOT NULL,
        instance INTEGER NOT NULL,
        since REAL NOT NULL,
        PRIMARY KEY (channel, chat_id)
    );
    CREATE INDEX chat_leases_instance ON chat_leases(instance);
    CREATE TABLE receivers (
        channel TEXT PRIMARY KEY,
        instance INTEGER NOT NULL,
        since REAL NOT NULL
    );
    ALTER TABLE jobs ADD COLUMN instance INTEGER;
    """,
    # 9: operating it for months: who wrote each user message (so a user can be forgotten), when
    #    a turn took its messages (`relaybot status`), the last error of each channel, indexes
    #    for pruning by age. Earlier user messages get their writer from the inbox: the one user
    #    of a private chat, or in a group the one user who wrote there under the speaker's name.
    """
    ALTER TABLE inbox ADD COLUMN taken_at REAL;
    ALTER TABLE messages ADD COLUMN user_id TEXT;
    UPDATE messages SET user_id = (
        SELECT MIN(i.user_id) FROM conversations c
        JOIN inbox i ON i.channel = c.channel AND i.chat_id = c.chat_id
        WHERE c.id = messages.conversation_id
        AND (c.is_private = 1 OR i.user_name = messages.speaker)
        HAVING COUNT(DISTINCT i.user_id) = 1
    ) WHERE role = 'user';
    CREATE INDEX messages_user ON messages(user_id) WHERE user_id IS NOT NULL;
    CREATE INDEX messages_created ON messages(created_at);
    CREATE INDEX deliveries_settled ON deliveries(sent_at) WHERE state != 'pending';
    CREATE TABLE channel_errors (
        channel TEXT PRIMARY KEY,
        at REAL NOT NULL,
        text TEXT NOT NULL
    );
    """,
    # 10: Discord shards spread over instances: what the last holder of a receiving part left to
    #     resume from (a shard's gateway session), kept while nobody holds it (instance 0)
    """
    ALTER TABLE receivers ADD COLUMN resume TEXT;
    """,
    *LATER,
]
