"""tokenbook.memorisation"""
