"""Parity checks of a family's implementation against its reference code.

`omni models verify FAMILY --checkpoint DIR` runs them on DIR/talker and
DIR/codec (a user's real checkpoints, or random-weight ones from
`omni models build-tiny`). Each family's module holds a list of small check
functions and a `run(checkpoint, *, seed)` that goes through it; the family
registry (omnicli.families) points at that `run`. Each check reports a
figure (max abs difference, matching token ids); a check whose reference
package is not installed is reported as skipped, never as passed.

Tooling, not runtime: nothing under omnicli.engine imports this package.
"""
