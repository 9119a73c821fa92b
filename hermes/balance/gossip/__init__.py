"""Gossip balancing of objects: ``grapevine`` (inform + transfer, Pébaÿ & Lifflander) and its serial reference
``grapevine_serial``. Nothing is imported here.
"""
