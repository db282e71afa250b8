"""Planning, the bottom layer of the planner: the state graph built from the loaded catalogs
(:mod:`.graph`), the inputs a task gives and how they map to parameters and states (:mod:`.inputs`),
the delete-free relaxation whose bounds prune and certify the search (:mod:`.delete_free`), that
search (:mod:`.delete_free_search`, its costly stages in :mod:`.corridor_search`), the cheapest
plans to goal states (:mod:`.plans`) and pictures of the graph (:mod:`.picture`). It knows
nothing of skill search, tasks or interfaces; the modules load on use (this file imports nothing).
"""
