"""The embedded environment servers, and the reference policies that play them."""
