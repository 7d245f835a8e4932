"""The pipeline host: the Ray actor of the service that holds one configuration's and
one workspace's pipeline and its conversations (:mod:`._host`), with what it is made
of: a hosted conversation and its item cursor (:mod:`._hosted`), the coordinators it
shares or gives each chat (:mod:`._host_coordinators`), its load runs
(:mod:`._host_load`) and the store requests it answers (:mod:`._store_requests`).
Nothing is imported here: the daemon and the tests import the module they need."""
