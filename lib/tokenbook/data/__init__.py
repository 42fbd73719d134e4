"""tokenbook.data"""
