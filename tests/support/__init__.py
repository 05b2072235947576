"""What several test modules share: paths, the hooked-run and CLI helpers, one manual clock,
a condition wait, and the scripted sessions and observations. Test modules import from here,
never from ``conftest`` or from each other."""
