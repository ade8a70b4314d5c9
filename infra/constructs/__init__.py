"""One construct per capability; the stack composes them."""
