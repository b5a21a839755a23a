"""The hand-written TLA+ twin of the spec (HiCache*.tla), shipped as package data so that
`tiercheck tla` finds the modules in any install."""
