//! `frontend`: the locality-aware cluster front end (LARD, WRR). Not built yet: no open issue asks for it.
