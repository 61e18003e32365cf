//! `loadgen`: a browser-emulating load generator that measures what users feel.
