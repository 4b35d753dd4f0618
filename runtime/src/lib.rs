//! arenac library.
