"""convoy-conformance: the conformance suite for convoy's sync policy, and the kit around it."""
