// Installed, but tidemark.h never reaches it.
