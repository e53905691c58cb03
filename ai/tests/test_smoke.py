from evennia.utils.test_resources import BaseEvenniaTest


class TestSmoke(BaseEvenniaTest):
    def test_room(self):
        self.assertEqual(self.char1.location, self.room1)
