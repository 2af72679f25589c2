"""Who a call stands for and what it may do: the OAuth resource server's token rules (resource_server.py), who
is calling and with which rights (callers.py), and what stands in front of HTTP: static tokens or OAuth access
tokens with their challenges, the scope a request needs and the run view's sign-in (authenticators.py)."""
