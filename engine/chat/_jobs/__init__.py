"""Work beside a chat's turns: background jobs, delegated sub-tasks, schedules, housekeeping."""
