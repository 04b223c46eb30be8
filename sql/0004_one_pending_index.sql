-- The claim must always walk jobs_claim_idx in claim order (R-Q3, R-Q10).
--
-- With a second index on pending jobs, (queue, run_at), the planner picked that one
-- plus a sort whenever its statistics were stale, e.g. in the first minute after a
-- bulk enqueue, before autovacuum's ANALYZE: every claim then read and sorted every
-- pending job of the queue, and draining 50,000 jobs one by one took minutes
-- (measured by bench/run.py: 124 jobs/s). The next-run_at lookup it served now uses
-- jobs_claim_idx too (see NEXT_RUN_IN), so the claim has no other choice.
DROP INDEX pgwake.jobs_pending_run_at_idx;
