"""Fleet simulator fixtures (owned by the simulator work; see clusters/simulator/)."""
