"""The SQLite schema's migrations from 11 on (the third batch of features), in order after
those of ``_schema.py``, which lists them all as ``MIGRATIONS``."""

from __future__ import annotations

LATER: list[str] = [
    # 11: replies: the message a user replied to, as the model is shown it with theirs (bounded,
    #     marked as a quote); kept with the inbox message (a turn after a restart has it too) and
    #     with the user message, whose quote is sent only in the turn that answers it
    """
    ALTER TABLE inbox ADD COLUMN quote TEXT;
    ALTER TABLE messages ADD COLUMN quote TEXT;
    """,
    # 12: memory (issue 28): the notes become short facts about a user (or a group), put into
    #     the prompt most recently used first; each note keeps its text and owner, and counts as
    #     used when it was written
    """
    ALTER TABLE notes RENAME TO memory;
    ALTER TABLE memory ADD COLUMN used_at REAL NOT NULL DEFAULT 0;
    UPDATE memory SET used_at = created_at;
    DROP INDEX notes_owner;
    CREATE INDEX memory_owner ON memory(owner, used_at);
    """,
    # 13: pairing: strangers' requests to use the bot (at most one pending per person) and the
    #     people an owner let in, per platform (issue 29)
    """
    CREATE TABLE access_requests (
        code TEXT PRIMARY KEY,
        channel TEXT NOT NULL,
        user_id TEXT NOT NULL,
        user_name TEXT NOT NULL,
        username TEXT NOT NULL,
        chat_id TEXT NOT NULL,
        asked_at REAL NOT NULL,
        expires_at REAL NOT NULL,
        state TEXT NOT NULL,
        decided_by TEXT,
        decided_at REAL
    );
    CREATE UNIQUE INDEX access_requests_pending ON access_requests(channel, user_id)
        WHERE state = 'pending';
    CREATE INDEX access_requests_asked ON access_requests(asked_at);
    CREATE TABLE approved_users (
        channel TEXT NOT NULL,
        user_id TEXT NOT NULL,
        user_name TEXT NOT NULL,
        approved_by TEXT NOT NULL,
        approved_at REAL NOT NULL,
        PRIMARY KEY (channel, user_id)
    );
    """,
    # 14: what requests cost (engine/chat/_access/_spend.py): per chat, user, day and model, in
    #     nano-dollars; and a chat's choice of voice replies (/settings)
    """
    CREATE TABLE spend (
        channel TEXT NOT NULL,
        chat_id TEXT NOT NULL,
        user_id TEXT NOT NULL,
        day TEXT NOT NULL,
        model TEXT NOT NULL,
        requests INTEGER NOT NULL DEFAULT 0,
        prompt_tokens INTEGER NOT NULL DEFAULT 0,
        completion_tokens INTEGER NOT NULL DEFAULT 0,
        images INTEGER NOT NULL DEFAULT 0,
        chars INTEGER NOT NULL DEFAULT 0,
        seconds REAL NOT NULL DEFAULT 0,
        nano_usd INTEGER NOT NULL DEFAULT 0,
        PRIMARY KEY (channel, chat_id, user_id, day, model)
    );
    CREATE INDEX spend_user ON spend(channel, user_id, day);
    CREATE INDEX spend_day ON spend(day);
    ALTER TABLE chat_settings ADD COLUMN voice TEXT;
    """,
    # 15: the web console (issue 32): sign-in links and sessions, as their tokens' SHA-256 only
    """
    CREATE TABLE console_links (token_hash TEXT PRIMARY KEY, admin TEXT NOT NULL,
        role TEXT NOT NULL, created_at REAL NOT NULL, expires_at REAL NOT NULL,
        used_at REAL);
    CREATE INDEX console_links_expiry ON console_links(expires_at);
    CREATE TABLE console_sessions (token_hash TEXT PRIMARY KEY, admin TEXT NOT NULL,
        role TEXT NOT NULL, csrf TEXT NOT NULL, created_at REAL NOT NULL,
        expires_at REAL NOT NULL, ended_at REAL);
    CREATE INDEX console_sessions_expiry ON console_sessions(expires_at);
    """,
    # 16: a chat's language for relaybot's own words (/settings language; issue 29)
    "ALTER TABLE chat_settings ADD COLUMN language TEXT;",
    # 17: several instances each hear their chats' work on a channel of their own (its name;
    #     none: an older relaybot, which hears everything on the shared one)
    "ALTER TABLE instances ADD COLUMN channel TEXT;",
    # 18: a turn the user stopped (/stop, Ctrl-C, the console's cancel): when, on each of its
    #     messages; no later request carries them (issue 40)
    "ALTER TABLE messages ADD COLUMN stopped_at REAL;",
    # 19: reasoning models (issue 43): what the model thought before an assistant message's
    #     text and calls (JSON: the API's own items, sent back with the calls after a restart);
    #     a chat's choice to be shown a short view of it (/settings thinking); the tokens spent
    #     thinking, apart (/usage)
    """
    ALTER TABLE messages ADD COLUMN reasoning TEXT;
    ALTER TABLE spend ADD COLUMN reasoning_tokens INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE chat_settings ADD COLUMN thinking INTEGER;
    """,
    # 20: how many errors each channel met, per minute (the console's "in the last hour"; the
    #     newest error's text stays in channel_errors); kept a day
    """
    CREATE TABLE channel_error_counts (
        channel TEXT NOT NULL,
        minute INTEGER NOT NULL,
        n INTEGER NOT NULL,
        PRIMARY KEY (channel, minute)
    );
    """,
    # 21: where each message's words came from (issue 41): its trust and a short label of its
    #     source (NULL: trusted); a summary's sources (JSON), so what it folded keeps its trust;
    #     whose words a forwarded message carries
    """
    ALTER TABLE messages ADD COLUMN trust TEXT;
    ALTER TABLE messages ADD COLUMN source TEXT;
    ALTER TABLE summaries ADD COLUMN sources TEXT;
    ALTER TABLE inbox ADD COLUMN forwarded TEXT;
    """,
    # 22: OAuth 2.1 sign-ins to remote MCP servers (issue 42): per server, its tokens and its
    #     client registration, each encrypted (bot/_mcp_oauth.py); the owner's, not a user's
    """
    CREATE TABLE mcp_oauth (
        server TEXT NOT NULL,
        kind TEXT NOT NULL,
        sealed TEXT NOT NULL,
        updated_at REAL NOT NULL,
        PRIMARY KEY (server, kind)
    );
    """,
    # 23: which relaybots run on this schema (issue 45, rolling upgrades and rollbacks): those
    #     that know at least `readable_from` migrations. Every migration so far only adds (a
    #     table, a column), so a relaybot of schema 20 or later runs on it; a migration that
    #     drops or renames (a release after the one that stopped using it) sets it to its number
    """
    CREATE TABLE schema_compat (readable_from INTEGER NOT NULL);
    INSERT INTO schema_compat(readable_from) VALUES (20);
    """,
    # 24: where a running background job is, kept by its tool for its resumption after a
    #     restart (an MCP task's server, id and session: tools/mcp/_tasks.py); and where a
    #     finished job's result came from when nobody in the chat wrote it (containment)
    """
    ALTER TABLE jobs ADD COLUMN resume TEXT;
    ALTER TABLE jobs ADD COLUMN untrusted TEXT;
    """,
]
