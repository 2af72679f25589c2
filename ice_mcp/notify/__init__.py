"""Notifications: finished runs POSTed, signed, to targets through an outbox every server on the store drains."""
