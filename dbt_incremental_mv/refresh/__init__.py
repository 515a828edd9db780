"""Fast refresh: one module per view class, plus what they share (marked changes, state)."""
