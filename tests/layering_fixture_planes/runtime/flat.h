// A runtime file in no plane.
