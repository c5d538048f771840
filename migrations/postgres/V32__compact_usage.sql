-- From this version on, a turn row keeps its usage as counts, `[input_tokens, output_tokens,
-- tool_calls, wall_ms]`, and a packed events row leaves out a stop's token counts where they
-- are the sums of the row's usage entries (see src/store/usage.rs and src/store/packed.rs).
-- A release without this migration would count such turns as using no tokens. This
-- migration being applied makes such a release refuse to start on the database. No schema
-- change: rows written before keep their form and read alike.
SELECT 1;
