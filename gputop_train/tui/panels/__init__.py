"""The panels: widgets that each show part of a view (base.py says what a panel is)."""
