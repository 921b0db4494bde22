"""Confined source reading: archives as hostile input, bounded tar/zip readers, the commit binding."""
