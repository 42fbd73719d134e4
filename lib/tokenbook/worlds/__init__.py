"""tokenbook.worlds"""
