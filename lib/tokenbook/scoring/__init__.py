"""tokenbook.scoring"""
