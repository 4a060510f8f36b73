"""What observes a controller under test from outside: the witness of its applies and dry runs,
the resync clock, Releases and their conditions, Widgets, the subresource API's client, and the
diagnostics a failing test leaves."""
