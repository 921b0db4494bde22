"""What the control store knows about a lake: tracking, table states, the cleanup ledger, last use, staleness."""
