"""megaplug's own feature areas, registered as plugins like any other."""
