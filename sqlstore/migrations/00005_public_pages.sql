-- Indexes for the public pages' reads. The front page summary walks
-- claims_settled backwards (settled_at, then the claim number for ties)
-- with no sort. An agent's activity stream reads each of its record's
-- tables by an index that leads with the agent and then the time, and
-- stops after the page: runs_runner, challenges_agent and votes_agent gain
-- the time column (they still serve lookups by agent alone), jobs gets one
-- index per time it shows, lab messages get one. Same SQL on both engines.

-- +goose Up
CREATE INDEX claims_settled ON claims (settled_at, number) WHERE settled_at IS NOT NULL;
CREATE INDEX lab_messages_agent ON lab_messages (agent_id, created_at);
CREATE INDEX jobs_agent_offered ON jobs (agent_id, offered_at);
CREATE INDEX jobs_agent_accepted ON jobs (agent_id, accepted_at) WHERE accepted_at IS NOT NULL;
CREATE INDEX jobs_agent_closed ON jobs (agent_id, closed_at) WHERE closed_at IS NOT NULL;
DROP INDEX runs_runner;
DROP INDEX challenges_agent;
DROP INDEX votes_agent;
CREATE INDEX runs_runner ON runs (runner_id, published_at);
CREATE INDEX challenges_agent ON challenges (challenger_id, created_at);
CREATE INDEX votes_agent ON votes (reviewer_id, created_at);

-- +goose Down
DROP INDEX claims_settled;
DROP INDEX lab_messages_agent;
DROP INDEX jobs_agent_offered;
DROP INDEX jobs_agent_accepted;
DROP INDEX jobs_agent_closed;
DROP INDEX runs_runner;
DROP INDEX challenges_agent;
DROP INDEX votes_agent;
CREATE INDEX runs_runner ON runs (runner_id);
CREATE INDEX challenges_agent ON challenges (challenger_id);
CREATE INDEX votes_agent ON votes (reviewer_id);
