//! (placeholder until this suite lands)
