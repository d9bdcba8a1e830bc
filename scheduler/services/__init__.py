"""Writes. Every function is keyword-only, validates before it writes, and runs in one transaction.

Refusals raise django.core.exceptions.ValidationError keyed by the field at fault, with a
message that names the limit; nothing is written when one is raised.
"""
