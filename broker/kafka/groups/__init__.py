"""Kafka consumer groups: the coordinator of the classic group protocol, over Strata subscriptions.

`group` is one group's state machine, `coordinator` keeps the groups this broker coordinates (which
groups, by the owner of a bundle) and stores them, `offsets` commits and reads offsets on the
brokers that serve the partitions, and `api` answers the group requests.
"""
