-- From this version on, the batch that stores a turn's turn_stop stores the events of that
-- turn it holds as one events row of kind 'packed' (see src/store/packed.rs). A release
-- without this migration cannot read such rows; this migration being applied makes it refuse
-- to start on the database (refinery aborts on an applied migration it does not have)
-- instead of failing on the first packed turn it reads. No schema change.
SELECT 1;
