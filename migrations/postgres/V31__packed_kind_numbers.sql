-- From this version on, a packed events row names the kinds of its entries by number (see
-- src/store/packed.rs), which a release without this migration reads as corrupt. This
-- migration being applied makes such a release refuse to start on the database (refinery
-- aborts on an applied migration it does not have) instead of failing on the first packed
-- turn it reads. No schema change.
SELECT 1;
