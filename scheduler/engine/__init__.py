"""The scheduling engine: pure Python, no Django (DESIGN §5).

`cycle.run_cycle(Snapshot) -> Decisions` is the whole interface; the live loop, the simulator and
the scenario command (`scheduler/engine_tools/`) all call it. The cycle is a short list of steps over
one `state.CycleState`; each rule has a module named after it: `quota` (the tree and its arithmetic),
`fit` (the one best-fit key), `placement` (gang best fit), `nomination` (reservations), `in_quota` and
`idle` (the two passes), `victims/` (ordering, search with the one fill-back, the index), `promotion`,
`pending`; `policies/` holds each §2b policy behind the hooks of `policies.base`; `reasons` the typed
reasons and their one rendering; `capacity` (free and being-released capacity, indexed), `memo` (the
failure memos), `demand` (what a job asks for), `types` (the plain data in and out).
"""
