//! `server`: the HTTP/1.1 server whose CPU work passes through the policy-ordered gate.
