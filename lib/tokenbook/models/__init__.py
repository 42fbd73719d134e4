"""tokenbook.models"""
