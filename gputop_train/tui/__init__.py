"""The Textual front end: screens and widgets over session snapshots; no sampling here."""
