//! `lab`: experiments end to end on the real server, beside real peers.
